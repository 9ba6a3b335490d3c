# expect: BT0308 2:10
k = n << 64
r = x
