# constant expressions fold, as module constants do
a = 2 ** 10
b = (1 << 4) | 3
c = -1
d = ~0
e = 7 // 2 + 7 % 3 - 9 >> 1
f = 2.0 ** 0.5
r = f32(n + a + b + c + d + e) + f
