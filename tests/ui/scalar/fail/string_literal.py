# expect: BT0200 2:5
s = "text"
r = x
