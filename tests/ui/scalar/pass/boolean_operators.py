# and, or, not on conditions
a = n > 0 and m > 0
b = n < 0 or not a
r = 1.0 if a or b and not (x > 1.0) else 0.0
