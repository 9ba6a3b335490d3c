# shifts of run-time values by constant amounts
a = n << 3
b = n >> 2
c = u >> 1
d = m << 1
r = f32(a + b) + f32(c) + f32(d)
