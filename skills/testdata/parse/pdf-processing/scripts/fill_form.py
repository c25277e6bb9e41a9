import sys
print("fill", sys.argv[1:])
