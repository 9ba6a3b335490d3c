# expect: BT0200 2:10
r = x if n is m else 0.0
