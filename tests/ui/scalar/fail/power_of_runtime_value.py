# expect: BT0200 2:5
r = x ** 2
