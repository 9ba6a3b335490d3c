# math functions and constants
p = math.sqrt(x) + math.exp(x) + math.floor(x) + math.pow(x, 2.0) + math.log(x)
q = abs(x) + max(x, 1.0) + min(x, 2.0) + math.fabs(x) + math.pi
k = max(n, 3) + abs(n)
r = p + q + f32(k)
