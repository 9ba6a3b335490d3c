from buildtile import simt
from buildtile.types import DisjointTensor, Tensor, f32

CENTER = -6.0


@simt.kernel(block=(4, 8, 32), requires=["u.shape[0] == lap.shape[0]", "u.shape[1] == lap.shape[1]",
                                         "u.shape[2] == lap.shape[2]"])
def laplacian(u: Tensor[f32, 3], lap: DisjointTensor[f32, 3], h: f32):
    """7-point Laplacian; boundary cells are copied through."""
    z, y, x = simt.index_3d()
    nz = u.shape[0]
    ny = u.shape[1]
    nx = u.shape[2]
    if z >= nz or y >= ny or x >= nx:
        return
    if z == 0 or y == 0 or x == 0 or z == nz - 1 or y == ny - 1 or x == nx - 1:
        lap[z, y, x] = u[z, y, x]
        return
    s = u[z - 1, y, x] + u[z + 1, y, x] + u[z, y - 1, x] + u[z, y + 1, x] + u[z, y, x - 1] + u[z, y, x + 1]
    lap[z, y, x] = (s + CENTER * u[z, y, x]) / (h * h)
