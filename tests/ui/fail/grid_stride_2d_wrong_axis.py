# expect: BT0499 12:19
from buildtile import simt
from buildtile.types import DisjointTensor, f32


@simt.kernel(block=(8, 8))
def k(image: DisjointTensor[f32, 2]):
    start_x, start_y = simt.grid(2)
    grid_x, grid_y = simt.gridsize(2)
    for x in range(start_x, image.shape[1], grid_x):
        for y in range(start_y, image.shape[0], grid_x):
            image[y, x] = 1.0
