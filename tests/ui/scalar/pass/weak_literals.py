# an integer literal takes the type it meets, a float literal any float type
k = m * 3 + 1
w = u + 7
d = y * 2 + 1
r = x + 1 + f32(k) + f32(w) + f32(d)
