//! Kerchunk reference import (see issue: virtual chunks).
