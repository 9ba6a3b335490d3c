# expect: BT0308 2:9
r = x + 1.0e39
