"""The apps written in JavaScript or TypeScript, one module each: their templates copied verbatim, their join code
mirrored in Python (template literals evaluated as JavaScript would). Each imports `..corpus`, `..shape` and
`..templates` only."""
