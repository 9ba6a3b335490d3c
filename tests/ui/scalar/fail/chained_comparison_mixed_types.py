# expect: BT0308 2:12
r = 1.0 if 0 < m < u else 0.0
