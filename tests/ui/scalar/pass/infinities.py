# infinities are values of every float type; only a finite literal past the type's range is refused
lo = -math.inf
hi = math.inf
big = 3.0e38
r = max(min(x, hi), lo) + big * 0.0
