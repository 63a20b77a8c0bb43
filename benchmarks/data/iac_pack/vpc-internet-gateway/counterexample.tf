resource "aws_vpc" "main" {
  cidr_block = "172.16.0.0/16"
}

resource "aws_internet_gateway" "main" {
  tags = {
    Name = "main-igw"
  }
}
