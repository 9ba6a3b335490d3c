# a scalar parameter assigned in the body is a local copy, as in Python
n = n + 1
if m > 0:
    x *= 2.0
r = x + f32(n)
