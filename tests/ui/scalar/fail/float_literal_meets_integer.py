# expect: BT0308 2:5
k = n + 1.5
r = x
