# expect: BT0080 2:10
r = x + (1 // 0)
