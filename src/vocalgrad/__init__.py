"""vocalgrad: does an audio language model hear gradual acoustic change?"""

__version__ = "0.1.0"
