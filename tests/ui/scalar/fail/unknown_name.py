# expect: BT0425 2:9
r = x + zz
