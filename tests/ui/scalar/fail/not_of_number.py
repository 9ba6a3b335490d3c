# expect: BT0308 2:14
r = x if not n else 0.0
