"""How the float32 erf constants of fgrad/lower/llvm/kernels/vmath.py were made.

Run: python docs/fit_erf.py (needs mpmath). Prints ERF_NEAR and ERF_FAR: least-squares fits
on Chebyshev nodes, in 40-digit arithmetic, of
- near 0, |x| < 0.875: erf(x) / x - 1 as a polynomial in u = x^2 (degree 5), so that
  erf(x) = x + x q(u) rounds once;
- beyond, up to 3.92 (where float32 erf rounds to 1): erfc(x) exp(x^2) as a polynomial in
  w = 1 / (1 + x / 2) (degree 6), so that erf(x) = 1 - exp(-x^2) R(w).
Lowest degree first. tests/lower/llvm/test_llvm_kernels.py measures the result in ulps.
"""
import mpmath as mp

mp.mp.dps = 40
NEAR, FAR = 0.875, 3.92


def least_squares(fn, lo, hi, degree, var, weight, nodes=400):
    """Coefficients (lowest first) of the polynomial in var(x) closest to fn on [lo, hi],
    each node's residual scaled by weight(x, fn(x))."""
    xs = [mp.mpf(lo) + (mp.mpf(hi) - lo) * (1 - mp.cos(mp.pi * (i + 0.5) / nodes)) / 2
          for i in range(nodes)]
    a, b = mp.matrix(nodes, degree + 1), mp.matrix(nodes, 1)
    for i, x in enumerate(xs):
        y = fn(x)
        w = weight(x, y)
        for j in range(degree + 1):
            a[i, j] = w * var(x) ** j
        b[i] = w * y
    solution = mp.lu_solve(a.T * a, a.T * b)
    return tuple(float(solution[j]) for j in range(degree + 1))


def near(u):
    return mp.erf(mp.sqrt(u)) / mp.sqrt(u) - 1 if u > 0 else 2 / mp.sqrt(mp.pi) - 1


if __name__ == "__main__":
    print("ERF_NEAR =", least_squares(near, 0, NEAR ** 2, 5, lambda u: u,
                                      lambda u, y: 1 / (1 + y), nodes=2000))
    print("ERF_FAR =", least_squares(lambda x: mp.erfc(x) * mp.exp(x * x), NEAR, FAR, 6,
                                     lambda x: 1 / (1 + x / 2), lambda x, y: 1 / abs(y)))
