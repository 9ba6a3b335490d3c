# every arithmetic and bitwise operator updates in place
a = x
a += 1.0
a -= x
a *= 2.0
a /= 3.0
k = n
k //= 2
k %= 7
k <<= 1
k >>= 1
k &= 255
k |= 1
k ^= 3
r = a + f32(k)
