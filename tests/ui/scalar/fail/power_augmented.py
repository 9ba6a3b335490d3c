# expect: BT0200 3:1
r = x
r **= 2
