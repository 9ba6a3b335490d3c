# a < b < c is (a < b) and (b < c)
c = 0 < n < 10
d = 0.0 <= x < 1.0 <= 2.0
r = 1.0 if c and d else 2.0
