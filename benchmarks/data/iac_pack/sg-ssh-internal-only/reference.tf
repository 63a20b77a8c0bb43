resource "aws_security_group" "bastion" {
  name        = "bastion-ssh"
  description = "SSH from the internal network"
}

resource "aws_vpc_security_group_ingress_rule" "ssh" {
  security_group_id = aws_security_group.bastion.id
  ip_protocol       = "tcp"
  from_port         = 22
  to_port           = 22
  cidr_ipv4         = "10.0.0.0/8"
}
