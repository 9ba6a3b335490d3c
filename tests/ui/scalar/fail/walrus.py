# expect: BT0200 2:6
r = (k := x)
