# unary minus, plus, not and invert
a = -x
b = -n
c = ~n
d = not (n > 0)
e = +x
g = ~(m > 0)
r = a + e + f32(b + c) + (1.0 if d or g else 0.0)
