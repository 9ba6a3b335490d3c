# + - * / // % on integers and floats, with Python's rounding
p = x * 2.0 - x / 3.0
k = n // 3 + n % 5 - n * 2
f = x // 2.0 + x % 2.0
q = n / 2
r = p + f32(k) + f + f32(q)
