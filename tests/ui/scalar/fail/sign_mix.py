# expect: BT0308 2:5
r = m + u
