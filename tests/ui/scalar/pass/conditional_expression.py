# a if cond else b, literals taking the other side's type
p = x if n > 0 else -x
k = 1 if m > 2 else m
r = p + f32(k) + f32(y if x > 0.0 else 1.0)
