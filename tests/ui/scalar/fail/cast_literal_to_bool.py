# expect: BT0308 2:5
c = bool_(1)
r = x
