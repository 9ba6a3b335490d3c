# expect: BT0308 2:5
r = f16(x) + bf16(x)
