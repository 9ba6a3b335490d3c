# expect: BT0308 2:5
r = f32(x, y)
