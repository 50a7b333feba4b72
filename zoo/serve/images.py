"""Image files of a captioning request, decoded and resized for the model."""

import numpy as np

from zoo.serve.payloads import RequestError


def decode_images(contents, image_size, limits):
    """The image files `contents` (bytes each) as float32 `[N, S, S, 3]` in
    [0, 1], read as training reads them (`zoo.export.onnx_runner.load_image_bytes`,
    Pillow); a 400 or a 413 naming the image and the limit otherwise."""
    from zoo.export import onnx_runner

    image_limits = {
        "max_image_bytes": limits.max_image_bytes,
        "max_image_side": limits.max_image_side,
    }
    images = []
    for index, data in enumerate(contents):
        name = f"image {index}"
        try:
            images.append(onnx_runner.load_image_bytes(data, image_size, image_limits, name))
        except onnx_runner.RequestTooLarge as error:
            raise RequestError(
                413,
                f"{error}; this server's limits are --max-image-bytes {limits.max_image_bytes} "
                f"and --max-image-side {limits.max_image_side}",
            ) from None
        except onnx_runner.MissingPackageError as error:
            # Pillow missing is the server's fault, not the request's.
            raise RequestError(500, str(error)) from None
        except onnx_runner.RunnerError as error:
            raise RequestError(400, str(error)) from None
    return np.stack(images)
