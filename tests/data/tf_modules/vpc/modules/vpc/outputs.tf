output "vpc_id" {
  value = aws_vpc.this.id
}

output "cidr" {
  value = aws_vpc.this.cidr_block
}

output "subnet_ids" {
  value = aws_subnet.private[*].id
}
