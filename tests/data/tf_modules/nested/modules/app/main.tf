variable "name" {
  type = string
}

variable "instance_type" {
  type    = string
  default = "t3.small"
}

module "role" {
  source = "../role"

  name    = "${var.name}-instance"
  service = "ec2.amazonaws.com"
}

resource "aws_iam_instance_profile" "this" {
  name = var.name
  role = module.role.name
}

resource "aws_instance" "this" {
  ami                  = "ami-0c55b159cbfafe1f0"
  instance_type        = var.instance_type
  iam_instance_profile = aws_iam_instance_profile.this.name

  tags = {
    Name = var.name
  }
}

output "instance_id" {
  value = aws_instance.this.id
}
