provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "sec" {
  name     = "rg-sec"
  location = "uksouth"
}

resource "azurerm_network_security_group" "web" {
  name                = "nsg-web"
  location            = azurerm_resource_group.sec.location
  resource_group_name = azurerm_resource_group.sec.name

  security_rule {
    name                       = "allow-https"
    priority                   = 100
    direction                  = "Inbound"
    access                     = "Allow"
    protocol                   = "Tcp"
    source_port_range          = "*"
    destination_port_range     = "443"
    source_address_prefix      = "*"
    destination_address_prefix = "*"
  }
}
