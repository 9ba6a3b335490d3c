# expect: BT0308 3:5
z = x
z = y
r = z
