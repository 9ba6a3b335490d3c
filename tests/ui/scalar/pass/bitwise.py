# & | ^ on integers, and on bools
a = n & 7
b = n | 8
c = n ^ 5
t = (n > 0) & (m > 0) | (n < 0) ^ (m < 0)
r = f32(a + b + c) + (1.0 if t else 0.0)
