# expect: BT0308 3:5
k = m
k = n
r = x
