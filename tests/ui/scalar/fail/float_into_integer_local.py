# expect: BT0308 3:5
k = n
k = x
r = x
