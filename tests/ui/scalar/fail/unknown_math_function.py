# expect: BT0425 2:5
r = math.gamma(x)
