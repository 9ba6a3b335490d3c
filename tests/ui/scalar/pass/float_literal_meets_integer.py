k = n + 1.5
r = x + k
