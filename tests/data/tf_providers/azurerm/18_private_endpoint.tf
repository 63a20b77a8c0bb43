provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "pe" {
  name     = "rg-pe"
  location = "westeurope"
}

resource "azurerm_private_dns_zone" "blob" {
  name                = "privatelink.blob.core.windows.net"
  resource_group_name = azurerm_resource_group.pe.name
}

resource "azurerm_private_endpoint" "blob" {
  name                = "pe-blob"
  location            = azurerm_resource_group.pe.location
  resource_group_name = azurerm_resource_group.pe.name
  subnet_id           = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-pe/providers/Microsoft.Network/virtualNetworks/vnet/subnets/pe"

  private_service_connection {
    name                           = "blob"
    private_connection_resource_id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-pe/providers/Microsoft.Storage/storageAccounts/acme"
    subresource_names              = ["blob"]
    is_manual_connection           = false
  }

  private_dns_zone_group {
    name                 = "default"
    private_dns_zone_ids = [azurerm_private_dns_zone.blob.id]
  }
}
