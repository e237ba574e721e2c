"""Image folders (torchvision's ``ImageFolder`` layout) read in place.

Example:
    >>> from thresher.sources.formats.image_folder import IMG_EXTENSIONS
    >>> ".jpg" in IMG_EXTENSIONS and ".webp" in IMG_EXTENSIONS
    True
"""

from thresher.sources.formats.image_folder.decode import check_signature, decode_image
from thresher.sources.formats.image_folder.scan import IMG_EXTENSIONS, Listing, scan_folder
from thresher.sources.formats.image_folder.source import ImageFolderSource

__all__ = ["IMG_EXTENSIONS", "ImageFolderSource", "Listing", "check_signature", "decode_image", "scan_folder"]
