# casts between scalar types; a literal converts at compile time
a = f32(n)
b = i32(x)
c = f64(x)
d = i64(2.7)
e = u32(m)
g = f32(7)
r = a + f32(b) + f32(c) + f32(d) + f32(e) + g
