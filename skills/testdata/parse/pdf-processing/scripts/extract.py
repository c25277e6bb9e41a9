import sys
print("extract", sys.argv[1:])
