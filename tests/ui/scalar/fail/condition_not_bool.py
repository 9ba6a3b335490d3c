# expect: BT0308 2:10
r = x if n else 0.0
