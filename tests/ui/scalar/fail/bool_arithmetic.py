# expect: BT0308 2:5
r = (n > 0) + 1
