# literals of every kind, typed by what they meet
a = 3
b = 2.5
c = True
r = x * b + f32(n * a) if c else x
